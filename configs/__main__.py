"""`python -m seq2seq.configs GROUP [PREFIX]`: a group's preset names, comma-separated
(what `make compare` sweeps over)."""

import sys

from seq2seq.configs import preset_names

print(",".join(preset_names(*sys.argv[1:3])))
