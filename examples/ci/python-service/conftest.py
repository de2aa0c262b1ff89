"""The suite's one client: a pooled ItemsClient shared by every test, as
a code base shares one. Its URL is ITEMS_URL (run-suite.sh points it at
the guard's lab, KAS_LAB_URL), its keepalive_expiry KEEPALIVE_EXPIRY.
"""

import pytest

from client import ItemsClient


@pytest.fixture(scope="session")
def items():
    client = ItemsClient()
    yield client
    client.close()
