"""``python -m shapeshift.train``: run the reference trainer (see ``trainer.py``)."""

import sys

from shapeshift.train.trainer import main

sys.exit(main())
