"""A client that calls its upstream now and then, through one pool.

The server keeps an idle connection 1 s (its Keep-Alive: timeout=1, plus
the grace the lab adds). A pool that keeps idle connections longer reuses
one after the server's promise has run out: served this time, lost when
the server closes first. The guard reports that as `at risk`.
"""

import time


def test_calls_spread_out_reuse_only_fresh_connections(client, lab_url):
    for pause in (0.7, 0.7, 1.2):
        assert client.get(lab_url).text == "Hello, World!"
        time.sleep(pause)
    assert client.get(lab_url).status_code == 200
