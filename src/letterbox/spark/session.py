# A local SparkSession set up for letterbox: the Python workers run the same
# interpreter as the driver (so they import letterbox and the official
# client), the UI is off and shuffles are small. On a cluster, build the
# session with spark-submit's settings instead and call letterbox.spark.register.
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
