// Java HttpClient at the boundary: one request, then one after each pause.
//
// Usage: java Pauses.java MODE URL PAUSE_S...
// MODE is `nopool` (the advice table's "do not pool" setting, which is
// also its advice for a safe value under 2 s: Connection: close on each
// request, allowed by -Djdk.httpclient.allowRestrictedHeaders=connection),
// `seconds` (-Djdk.httpclient.keepalive.timeout=1, which the table no
// longer advises) or `default`. Prints `version V`, then `ok STATUS` or
// `error WHAT` per request; exits 1 if any failed.

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Pauses {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        if (mode.equals("nopool")) {
            System.setProperty("jdk.httpclient.allowRestrictedHeaders", "connection");
        } else if (mode.equals("seconds")) {
            System.setProperty("jdk.httpclient.keepalive.timeout", "1");
        }
        System.out.println("version " + System.getProperty("java.version"));
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(args[1]));
        if (mode.equals("nopool")) {
            builder.header("Connection", "close");
        }
        HttpRequest request = builder.build();
        int failures = 0;
        for (int i = 1; i <= args.length - 1; i++) {
            if (i > 1) {
                Thread.sleep((long) (Double.parseDouble(args[i]) * 1000));
            }
            try {
                HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
                System.out.println("ok " + response.statusCode());
            } catch (Exception e) {
                failures++;
                System.out.println("error " + e);
            }
        }
        System.exit(failures > 0 ? 1 : 0);
    }
}
