# `letterbox dlq replay`: edit-and-replay from the command line -- redrive dead letters (chosen by
# id or by failure group) with a change: a JSON patch or a new payload, properties set or removed
# (POST {dlq}/letterbox/redrive with `edit`, failure/edits.py). One call: the broker checks the
# edit against every selected message before anything moves, and moves each one edited in its
# redrive transaction. Needs the `edit` permission besides the redrive's. The command joins the
# `dlq` group when this module is imported (cli/__init__).
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import click

from letterbox.cli.dlq import dlq
from letterbox.cli.dlq_guards import require_dead_letter_topic
from letterbox.cli.http import AdminContext, admin_command
from letterbox.cli.params import FAILURE_GROUP, KEY_VALUE, TOPIC, topic_path
from letterbox.topic_name import TopicName


def _patch(text: str) -> list[Any]:
    """A JSON patch given inline or as @FILE."""
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    try:
        patch = json.loads(raw)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON ({exc}): give an RFC 6902 patch, e.g. "
                                 "'[{\"op\": \"replace\", \"path\": \"/amount\", \"value\": 12.5}]' or @patch.json",
                                 param_hint="'--json-patch'") from None
    if not isinstance(patch, list):
        raise click.BadParameter("a JSON patch is a list of operations", param_hint="'--json-patch'")
    return patch


@admin_command(dlq, "replay", "dlq_topic", TOPIC)
@click.option("--message-id", "-m", "message_ids", multiple=True,
              help="The dead letter to replay (ledger:entry:partition:batchIndex, as peek shows it); repeat.")
@click.option("--group", "-g", type=FAILURE_GROUP, help="Replay this failure group (`dlq groups`).")
@click.option("--json-patch", "json_patch", help="An RFC 6902 JSON patch for JSON payloads, inline or @FILE.")
@click.option("--payload-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Replace the payload with this file's bytes.")
@click.option("--set-property", "-p", "set_properties", type=KEY_VALUE, multiple=True,
              help="Set this property (key=value); repeat.")
@click.option("--remove-property", "remove_properties", multiple=True, help="Remove this property; repeat.")
@click.option("--dry-run", is_flag=True, help="Check the edit against every selected message; move nothing.")
def dlq_replay(a: AdminContext, dlq_topic: TopicName, message_ids: tuple[str, ...], group: str | None,
               json_patch: str | None, payload_file: Path | None, set_properties: tuple[tuple[str, str], ...],
               remove_properties: tuple[str, ...], dry_run: bool) -> None:
    """Redrive dead letters of DLQ_TOPIC with a change, recorded in each message's EDIT_LOG
    (who, when, the old payload's sha256).

    Choose them with --message-id or --group; change them with --json-patch or
    --payload-file and --set-property / --remove-property.
    """
    if not message_ids and not group:
        raise click.UsageError("choose the dead letters to replay: --message-id ID (repeat) or --group FINGERPRINT")
    if json_patch is not None and payload_file is not None:
        raise click.UsageError("give --json-patch or --payload-file, not both")
    edit: dict[str, Any] = {}
    if json_patch is not None:
        edit["jsonPatch"] = _patch(json_patch)
    if payload_file is not None:
        edit["payloadBase64"] = base64.b64encode(payload_file.read_bytes()).decode()
    if set_properties:
        edit["setProperties"] = dict(set_properties)
    if remove_properties:
        edit["removeProperties"] = list(remove_properties)
    if not edit:
        raise click.UsageError("nothing to change: give --json-patch, --payload-file, --set-property or "
                               "--remove-property (a plain redrive is `letterbox dlq redrive`)")
    require_dead_letter_topic(a, dlq_topic)
    body: dict[str, Any] = {"edit": edit, "dryRun": dry_run}
    if message_ids:
        body["messageIds"] = list(message_ids)
    if group:
        body["group"] = group
    res = a.client.post_json(topic_path(dlq_topic) + "/letterbox/redrive", body) or {}
    what = f"{len(message_ids)} chosen" if message_ids else f"group {group}"
    if dry_run:
        a.report(f"Dry run: the edit applies; would replay {res.get('matched', 0)} dead letters ({what}) "
                 f"of {dlq_topic}", res)
        return
    a.report(f"Replayed {res.get('moved', 0)} edited dead letters ({what}) of {dlq_topic}; "
             f"{res.get('remaining', 0)} matching remain", res)
