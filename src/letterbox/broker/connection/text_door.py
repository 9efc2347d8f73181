# The door for strings that are not UTF-8: a command whose string fields (names
# of consumers, producers, subscriptions, topics, namespaces, roles; property
# keys and values of consumer, producer and subscription metadata; client and
# auth method names) hold bytes that are not UTF-8 is refused before any
# handler sees it, with an error naming the field. The names a broker keeps
# (in cursor records, the attempt log, stats) are then always text.
# A refused CONNECT gets ERROR and the connection is closed; any other command
# its own error reply (InvalidTopicName for a topic or namespace, else
# NotAllowedError) and the connection goes on. SEND carries no strings in its
# command: a message's metadata is stored byte-exact, as Pulsar stores it.
# Invariants: SEND frames and ACKs of the common shape (no properties) are not
# parsed here; nothing is written but the one error reply.
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from letterbox.errors import ServerError
from letterbox.protocol import commands, pb
from letterbox.protocol.text_fields import invalid_text_field

if TYPE_CHECKING:
    from letterbox.broker.connection.server_cnx import ServerCnx
    from letterbox.protocol import Frame

log = logging.getLogger("letterbox.cnx")
T = pb.BaseCommand
_TOPIC_FIELDS = ("topic", "namespace", "topics_pattern")


def refused(cnx: ServerCnx, frame: Frame) -> bool:
    """True when the frame has a string field that is not UTF-8: the client got its error."""
    if frame.type == T.SEND or (frame.type == T.ACK and frame.ack is not None):
        return False
    field = invalid_text_field(frame.command)
    if field is None:
        return False
    name = field.split(".", 1)[1] if "." in field else field  # without the command's own name
    message = f"{name} is not valid UTF-8"
    log.info("refused %s from %s: %s", T.Type.Name(frame.type), cnx.remote, message)
    if frame.type == T.CONNECT:
        cnx.send(commands.error(commands.NO_REQUEST_ID, ServerError.NotAllowedError, message))
        cnx.close()
        return True
    top = name.split(".", 1)[0].split("[", 1)[0]
    code = ServerError.InvalidTopicName if top in _TOPIC_FIELDS else ServerError.NotAllowedError
    cnx.reply_error(frame.command, code, message)
    return True
