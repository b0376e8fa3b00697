"""``python -m sdk.cli``: the same tool as the ``chronicle`` script (the dev venv does not
install the SDK, so the script is not on its path)."""

from sdk.cli.main import main

main()
