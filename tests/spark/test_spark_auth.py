"""The Spark data source against a broker with token authentication and
authorization on: options auth_plugin / auth_params reach every official client
of the job and the topic-pattern listing (admin HTTP); a role with produce
writes, a role with consume reads, and a role without the permission or no
credentials fail the job."""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest

from tests.conftest import BrokerProcess
from tests.security.conftest import SUPER_USER, secure_env
from tests.security.http import call


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, bytes]]:
    secret = os.urandom(32)
    b = BrokerProcess(tmp_path_factory.mktemp("spark-secured") / "data", env=secure_env(secret)).start()
    yield b, secret
    b.stop()


def test_read_and_write_with_token_options(spark: Any, secured_broker: tuple[BrokerProcess, bytes]) -> None:
    broker, secret = secured_broker

    def token(role: str) -> str:
        return jwt.encode({"sub": role}, secret, algorithm="HS256")

    root = token(SUPER_USER)
    assert call(broker.admin_url, "PUT", "/admin/v2/tenants/acme", {"adminRoles": []}, token=root)[0] == 204
    grants = {"auth_policies": {"namespace_auth": {"writer": ["produce"], "reader": ["consume"]}}}
    assert call(broker.admin_url, "PUT", "/admin/v2/namespaces/acme/sp", grants, token=root)[0] == 204
    topic = f"persistent://acme/sp/t-{uuid.uuid4().hex[:6]}"

    def reader(role: str | None) -> Any:
        r = spark.read.format("letterbox").option("service_url", broker.url).option("topic", topic)
        if role is not None:
            r = r.option("auth_plugin", "token").option("auth_params", "token:" + token(role))
        return r

    df = spark.createDataFrame([(f"k{i}", f"v{i}".encode()) for i in range(20)], "key string, value binary")
    (df.write.format("letterbox").option("service_url", broker.url).option("topic", topic)
       .option("auth_plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken")
       .option("auth_params", "token:" + token("writer")).mode("append").save())
    got = reader("reader").load().collect()
    assert sorted(r.key for r in got) == sorted(f"k{i}" for i in range(20))
    by_pattern = (spark.read.format("letterbox").option("service_url", broker.url)
                  .option("admin_url", broker.admin_url).option("topics_pattern", "persistent://acme/sp/t-.*")
                  .option("auth_plugin", "token").option("auth_params", "token:" + token("reader")).load())
    assert by_pattern.count() == 20
    for role in ("writer", None):
        with pytest.raises(Exception, match=r"(?i)authori[sz]ation|authentication|connect"):
            reader(role).load().collect()
