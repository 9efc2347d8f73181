"""The attempt log route on a partitioned topic: a message id naming a partition the topic
does not have is a 404 that says so (it used to answer 405 "use one of its partitions",
although the id did name one), for GET and for the nack announcement."""
from __future__ import annotations

import uuid

from tests.admin.helpers import call
from tests.conftest import BrokerProcess


def test_a_partition_out_of_range_is_named(broker: BrokerProcess) -> None:
    name = f"attempts-parts-{uuid.uuid4().hex[:6]}"
    base = f"/admin/v2/persistent/public/default/{name}"
    assert call(broker.admin_url, "PUT", base + "/partitions", "2")[0] == 204
    assert call(broker.admin_url, "PUT", base + "/subscription/s")[0] == 204
    path = base + "/subscription/s/letterbox/attempts/"
    for method, body in (("GET", None), ("POST", '{"ending": "nack"}')):
        status, answer = call(broker.admin_url, method, path + "0:0:5:-1", body)
        assert status == 404, (method, status, answer)
        assert "partition 5" in answer["reason"] and "2 partitions" in answer["reason"], answer
    # an id without a partition still asks for one of the partitions
    status, answer = call(broker.admin_url, "GET", path + "0:0")
    assert status == 405 and "use one of its partitions" in answer["reason"], answer
