"""``python -m deltamerge.cli``."""

from deltamerge.cli import app

app()
