"""`python -m literate.tools.bench`: see the package's docstring."""

import sys

from literate.tools.bench import main

sys.exit(main())
