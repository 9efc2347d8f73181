# `letterbox pipeline run MODULE:HANDLER --topic T --subscription S --sink PATH`:
# runs the Spark retry / dead-letter pipeline (letterbox.spark.pipeline) with
# a handler importable from the current directory or PYTHONPATH. PySpark is
# imported only when the command runs, so the rest of the CLI stays fast.
# `run` ends with one summary line on stdout (or one JSON object with --json):
# the run's micro-batches and records read, sent to the sink, retried and
# dead-lettered; everything else it says goes to stderr, including, on a
# terminal (or with --progress), one line per micro-batch. --master takes
# local[...], a standalone cluster's spark://host:port or a Spark Connect
# server's sc://host:port; the handler's module, when it comes from the
# current directory, is shipped with the job (pickled by value), so the
# workers need letterbox installed but not the job's directory.
# `redrive` refuses a DLQ_TOPIC that is not a dead letter topic (cli/dlq_guards.py),
# exit status 2, before any Spark session starts.
from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from letterbox.auth_flags import auth_options, current_auth
from letterbox.cli.dlq_guards import require_dead_letter_topic
from letterbox.cli.http import AdminClient, AdminContext
from letterbox.cli.params import TopicParam
from letterbox.default_urls import (
    ADMIN_URL_ENV,
    DEFAULT_ADMIN_URL,
    DEFAULT_SERVICE_URL,
    SERVICE_URL_ENV,
)

# --service-url of every pipeline command: the same default and environment variable as the rest
service_url_option = click.option("--service-url", envvar=SERVICE_URL_ENV, default=DEFAULT_SERVICE_URL,
                                  show_default=True, help="The broker (env LETTERBOX_SERVICE_URL).")


@click.group()
def pipeline() -> None:
    """Spark pipelines: process a topic with retry and dead-letter routing."""


def load_handler(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.UsageError(f"handler must be MODULE:FUNCTION (e.g. myjobs.orders:handle), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.UsageError(f"cannot import module {module_name!r}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise click.UsageError(f"module {module_name!r} has no function {attr!r}")
    _ship_by_value(module)
    return fn


def _ship_by_value(module: Any) -> None:
    """A handler module from the current directory travels with the job: executors and a
    Spark Connect server do not run in this directory, so they could not import it."""
    path = getattr(module, "__file__", None)
    if path is None or not Path(path).resolve().is_relative_to(Path.cwd().resolve()):
        return
    from pyspark import cloudpickle

    top = sys.modules[module.__name__.partition(".")[0]]
    cloudpickle.register_pickle_by_value(top)  # type: ignore[no-untyped-call]


def _conf_pairs(values: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


@pipeline.command()
@click.argument("handler")
@click.option("--topic", required=True, help="Source topic.")
@click.option("--subscription", required=True, help="Name of the pipeline's durable subscription.")
@click.option("--sink", required=True, help="Directory for the Parquet output (one batch_id=N folder per micro-batch).")
@service_url_option
@click.option("--checkpoint", help="Spark checkpoint directory [<sink>/../<subscription>-checkpoint].")
@click.option("--master", default="local[*]", show_default=True,
              help="local[N], a standalone cluster's spark://HOST:7077 or a Spark Connect server's sc://HOST:15002.")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="Spark configuration for the session, e.g. spark.executor.memory=2g (repeatable).")
@click.option("--max-retries", type=int, default=3, show_default=True)
@click.option("--delays", help="Comma-separated delays per retry, e.g. 1s,10s,1m (default: the seed delay levels).")
@click.option("--dlq-topic", help="Dead letter topic [<topic>-<subscription>-DLQ].")
@click.option("--vectorized", is_flag=True, help="The handler takes a pandas DataFrame of records.")
@click.option("--max-records-per-trigger", type=int, help="Admission control per micro-batch.")
@click.option("--trigger-interval", default="1 second", show_default=True)
@click.option("--stop-after-idle", type=float, help="Stop once no record arrived for this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the final summary as one JSON object.")
@click.option("--progress/--no-progress", default=None,
              help="One line per micro-batch on stderr [default: when stderr is a terminal].")
@auth_options
def run(
    handler: str,
    topic: str,
    subscription: str,
    sink: str,
    service_url: str,
    checkpoint: str | None,
    master: str,
    confs: tuple[str, ...],
    max_retries: int,
    delays: str | None,
    dlq_topic: str | None,
    vectorized: bool,
    max_records_per_trigger: int | None,
    trigger_interval: str,
    stop_after_idle: float | None,
    as_json: bool,
    progress: bool | None,
) -> None:
    """Run HANDLER (MODULE:FUNCTION) over TOPIC as a Spark streaming pipeline."""
    from letterbox.failure import parse_seconds
    from letterbox.spark.pipeline import Pipeline, PolicyError, RetryPolicy

    fn = load_handler(handler)
    try:
        policy = RetryPolicy(
            max_retries=max_retries,
            delays=tuple(parse_seconds(d) for d in delays.split(",")) if delays else None,
        )
    except PolicyError as exc:
        raise click.UsageError(str(exc)) from None
    if max_records_per_trigger is not None and max_records_per_trigger < 1:
        raise click.UsageError("--max-records-per-trigger must be at least 1")
    ck = checkpoint or str(Path(sink).resolve().parent / f"{subscription}-checkpoint")
    conf = _conf_pairs(confs)
    show = sys.stderr.isatty() if progress is None else progress
    from letterbox.spark.session import spark_session

    spark = spark_session(master, f"letterbox-pipeline-{subscription}", **conf)
    try:
        p = Pipeline(
            spark=spark,
            service_url=service_url,
            topic=topic,
            subscription=subscription,
            handler=fn,
            sink=sink,
            checkpoint=ck,
            policy=policy,
            vectorized=vectorized,
            dead_letter_topic=dlq_topic,
            max_records_per_trigger=max_records_per_trigger,
            trigger_interval=trigger_interval,
            auth=current_auth(),
            count_outcomes=True,
        )
    except PolicyError as exc:
        raise click.UsageError(str(exc)) from None
    query = p.start()
    click.echo(f"pipeline {subscription}: {p.topics.source} -> {sink}; retries {list(p.topics.tiers.values())}; DLQ {p.topics.dead_letter}", err=True)
    try:
        _watch(query, p, stop_after_idle, show)
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        totals = p.totals()
        failure = query.exception()  # asked before the session stops (Spark Connect needs it)
        spark.stop()
    if failure is not None:
        raise click.ClickException(f"the pipeline failed: {failure}")
    click.echo(json.dumps({"subscription": subscription, **totals}) if as_json
               else summary_line(subscription, totals))


def summary_line(subscription: str, totals: dict[str, int]) -> str:
    return (f"pipeline {subscription}: {totals['records']} records read in {totals['batches']} micro-batches: "
            f"{totals['ok']} to the sink, {totals['retried']} retried, {totals['dead_lettered']} dead-lettered")


def progress_line(batch: dict[str, int], lag: int | None) -> str:
    records = batch["ok"] + batch["retry"] + batch["dead"]
    return (f"batch {batch['batch_id']}: {records} records in, {batch['ok']} ok, {batch['retry']} retried, "
            f"{batch['dead']} dead-lettered, lag {'?' if lag is None else lag}")


def _input_rows(progress: Any) -> int:
    n = getattr(progress, "numInputRows", None)
    if n is None and hasattr(progress, "get"):
        n = progress.get("numInputRows")
    return int(n or 0)


def source_lag(progress: Any, source: str, latest: Callable[[str], tuple[int, int]]) -> int | None:
    """Entries of the source topic's partitions between where the batch ended (the query's
    endOffset, {"<partition topic>": [ledger, next entry]}) and `latest(partition topic)`."""
    try:
        end = json.loads(progress["sources"][0]["endOffset"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if not isinstance(end, dict):
        return None
    lag = 0
    for topic, (ledger, entry) in end.items():
        if topic != source and not topic.startswith(source + "-partition-"):
            continue  # the retry tiers' backlog is not the source's lag
        last_ledger, last_entry = latest(topic)
        lag += max(0, last_entry - int(entry)) if last_ledger == ledger else max(0, last_entry)
    return lag


class LagProbe:
    """The source partitions' current ends, asked with the official client (a Reader each, nothing durable)."""

    def __init__(self, service_url: str, auth: Any) -> None:
        self.service_url, self.auth = service_url, auth
        self.client: Any = None

    def __call__(self, topic: str) -> tuple[int, int]:
        from letterbox.spark.broker_io import last_position, open_client

        if self.client is None:
            self.client = open_client(self.service_url, auth=self.auth)
        pos = last_position(self.client, topic)
        return (pos.ledger, pos.entry) if not pos.is_earliest else (-1, 0)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _watch(query: Any, pipeline: Any, idle_s: float | None, show: bool) -> None:
    """Wait for the query (until it is idle for idle_s, if given), printing a line per batch."""
    probe = LagProbe(pipeline.service_url, pipeline.auth)
    try:
        _watch_query(query, pipeline, idle_s, show, probe)
    finally:
        probe.close()


def _watch_query(query: Any, pipeline: Any, idle_s: float | None, show: bool, probe: LagProbe) -> None:
    # Progress entries are told apart by (batch id, timestamp), not by count: Spark keeps
    # only the last 100 (spark.sql.streaming.numRecentProgressUpdates).
    last_data = time.monotonic()
    seen: tuple[Any, ...] | None = None
    printed = 0
    while query.isActive:
        progress = query.recentProgress
        newest = _progress_key(progress[-1]) if progress else None
        if newest != seen:
            fresh = [p for p in progress if seen is None or _progress_key(p) > seen]
            if any(_input_rows(p) > 0 for p in fresh):
                last_data = time.monotonic()
            seen = newest
            if show:
                batches = pipeline.batch_counts()
                for b in batches[printed:]:
                    lag = source_lag(progress[-1], pipeline.topics.source, probe) if progress else None
                    click.echo(progress_line(b, lag), err=True)
                printed = len(batches)
        idle = time.monotonic() - last_data > idle_s if idle_s is not None else False
        if idle and seen is not None and not query.status["isTriggerActive"]:  # a first trigger has run
            return
        time.sleep(0.2)


def _progress_key(progress: Any) -> tuple[Any, ...]:
    return (int(progress["batchId"]), str(progress["timestamp"]))


@pipeline.command("dlq-report")
@click.argument("dlq_topic")
@click.option("--out", "out_dir", default="dlq-report", show_default=True, help="Directory for dlq-report.txt and .png.")
@service_url_option
@click.option("--master", default="local[*]", show_default=True)
@auth_options
def dlq_report_command(dlq_topic: str, out_dir: str, service_url: str, master: str) -> None:
    """Count DLQ_TOPIC's dead letters by reason, source topic, error and hour (table + PNG)."""
    from letterbox.spark.dlq_report import dlq_report
    from letterbox.spark.session import local_session

    spark = local_session(master, "letterbox-dlq-report")
    try:
        report = dlq_report(spark, service_url, dlq_topic, out_dir, auth=current_auth())
    finally:
        spark.stop()
    click.echo(report.text())
    click.echo(f"written: {report.text_path}, {report.png_path}", err=True)


@pipeline.command("redrive")
@click.argument("dlq_topic")
@click.option("--where", help="Spark SQL filter over the source schema, e.g. \"properties['DEAD_LETTER_REASON'] = 'terminated'\".")
@click.option("--target", help="Publish to this topic instead of each message's REAL_TOPIC.")
@click.option("--run-name", default="redrive", show_default=True, help="Runs with the same name, filter and target republish nothing twice.")
@service_url_option
@click.option("--master", default="local[*]", show_default=True)
@click.option("--subscription-only", is_flag=True, help="Put each selected message back into the subscription it died in only "
              "(Spark selects, the broker at --admin-url moves: atomic, other subscriptions do not see it).")
@click.option("--admin-url", envvar=ADMIN_URL_ENV, default=DEFAULT_ADMIN_URL, show_default=True,
              help="The broker's admin API (checks DLQ_TOPIC is a dead letter topic; --subscription-only moves "
                   "through it; env LETTERBOX_ADMIN_URL).")
@auth_options
def redrive_command(dlq_topic: str, where: str | None, target: str | None, run_name: str, service_url: str, master: str,
                    subscription_only: bool, admin_url: str) -> None:
    """Republish dead letters of DLQ_TOPIC that match --where, idempotently, on Spark."""
    if subscription_only and target:
        raise click.BadParameter("--subscription-only goes back to each message's own subscription: leave out --target")
    require_dead_letter_topic(AdminContext(AdminClient(admin_url, auth=current_auth())),
                              TopicParam().convert(dlq_topic, None, click.get_current_context()))
    from letterbox.spark.redrive import redrive
    from letterbox.spark.session import local_session

    spark = local_session(master, "letterbox-redrive")
    try:
        result = redrive(spark, service_url, dlq_topic, where=where, target=target, run_name=run_name,
                         auth=current_auth(), subscription_only=subscription_only, admin_url=admin_url)
    except Exception as exc:
        raise click.ClickException(f"redrive failed: {str(exc).splitlines()[0]}") from None
    finally:
        spark.stop()
    click.echo(f"selected {result['selected']} dead letters, republished {result['republished']}")
