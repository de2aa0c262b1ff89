"""The items service's API, through its client.

Some tests wait between calls, as a real suite's do (a job to finish, a
cache to expire): 1.5 s and 2.5 s, the longer ones past the service's 2 s
idle timeout. The pool's next call then either opens a new connection
(keepalive_expiry=1) or reuses the old one just as the service closes it
(keepalive_expiry=5): that reuse is what the guard catches, even in a run
in which no request was lost.
"""

import time

# Longer than the service's idle timeout (2 s), as a suite's waits are.
LONG_WAIT = 2.5
# Shorter than it, and longer than the fixed pool's keepalive_expiry (1 s).
SHORT_WAIT = 1.5


def test_a_new_item_is_201_with_its_location(items):
    response = items.create("lamp", 19.5)
    assert response.status_code == 201
    item = response.json()
    assert item["name"] == "lamp"
    assert item["price"] == 19.5
    assert response.headers["location"] == f"/items/{item['id']}"


def test_bad_input_is_422_naming_each_field(items):
    response = items.create("  ", -1)
    assert response.status_code == 422
    fields = [error["loc"][-1] for error in response.json()["detail"]]
    assert fields == ["name", "price"]
    assert items.create_raw(["not", "an", "object"]).status_code == 422


def test_an_item_reads_back_after_a_wait(items):
    created = items.create("desk", 120).json()
    time.sleep(LONG_WAIT)
    response = items.get(created["id"])
    assert response.status_code == 200
    assert response.json() == created


def test_a_missing_item_is_404_every_time(items):
    first = items.get(999_999)
    assert first.status_code == 404
    assert first.json() == {"detail": "item 999999 not found"}
    time.sleep(SHORT_WAIT)
    assert items.get(999_999).status_code == 404


def test_the_list_holds_every_item_created(items):
    created = [items.create(name, 5).json()["id"] for name in ("pen", "ink")]
    time.sleep(LONG_WAIT)
    response = items.list()
    assert response.status_code == 200
    listed = [item["id"] for item in response.json()["items"]]
    assert set(created) <= set(listed)
