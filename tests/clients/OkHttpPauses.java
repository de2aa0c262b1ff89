// OkHttp at the boundary: one request, then one after each pause.
//
// Usage: java -cp /usr/share/java/okhttp.jar:/usr/share/java/okio.jar
//        OkHttpPauses.java MODE URL PAUSE_S...
// MODE is `advised` (ConnectionPool(5, 1900, MILLISECONDS), the advice
// table's setting for a safe value of 1,900 ms) or `nopool`
// (ConnectionPool(0, 1, SECONDS)). Prints `version V`, then `ok STATUS` or
// `error WHAT` per request; exits 1 if any failed.

import java.util.concurrent.TimeUnit;
import okhttp3.ConnectionPool;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.Response;

public class OkHttpPauses {
    public static void main(String[] args) throws Exception {
        ConnectionPool pool = args[0].equals("advised")
                ? new ConnectionPool(5, 1900, TimeUnit.MILLISECONDS)
                : new ConnectionPool(0, 1, TimeUnit.SECONDS);
        OkHttpClient client = new OkHttpClient.Builder().connectionPool(pool).build();
        System.out.println("version " + okhttp3.internal.Version.userAgent());
        Request request = new Request.Builder().url(args[1]).build();
        int failures = 0;
        for (int i = 1; i <= args.length - 1; i++) {
            if (i > 1) {
                Thread.sleep((long) (Double.parseDouble(args[i]) * 1000));
            }
            try (Response response = client.newCall(request).execute()) {
                response.body().string();
                System.out.println("ok " + response.code());
            } catch (Exception e) {
                failures++;
                System.out.println("error " + e);
            }
        }
        client.dispatcher().executorService().shutdown();
        System.exit(failures > 0 ? 1 : 0);
    }
}
