# SparkSessions set up for letterbox. `local_session` builds a classic session
# (local[*] or a cluster's spark:// master): the Python workers run the
# driver's interpreter (PYSPARK_PYTHON, so on a cluster the same virtualenv
# path must exist on every worker), the UI is off and shuffles are small.
# `spark_session` also takes a Spark Connect address (sc://host:port): the
# session is then a Connect client and the server's cluster runs the work.
# Under spark-submit, build the session with its settings and call
# letterbox.spark.register.
from __future__ import annotations

import os
import sys
from typing import Any


def local_session(master: str = "local[*]", app_name: str = "letterbox", **conf: str) -> Any:
    from pyspark.sql import SparkSession

    from letterbox.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for k, v in conf.items():
        builder = builder.config(k.replace("_", "."), v) if "." not in k else builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def connect_session(url: str, **conf: str) -> Any:
    """A Spark Connect client session for `url` (sc://host:port) with letterbox registered."""
    from pyspark.sql import SparkSession

    from letterbox.spark import register

    builder = SparkSession.builder.remote(url)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def spark_session(master: str, app_name: str = "letterbox", **conf: str) -> Any:
    """local[...] / spark://... -> a classic session; sc://... -> a Spark Connect session."""
    if master.startswith("sc://"):
        return connect_session(master, **conf)
    return local_session(master, app_name, **conf)
