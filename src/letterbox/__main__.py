# `python -m letterbox`. The cyclic collector is off while the command's modules load:
# start-up builds only objects that live on, and collecting them cost about a tenth of a
# broker's start. The root command turns it back on (cli.main), or for `standalone` once
# the broker has started (standalone.tune_gc).
import gc

gc.disable()

from letterbox.cli import main  # noqa: E402  (after the collector is off)

main()
