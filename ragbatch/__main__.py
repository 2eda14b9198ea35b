from ragbatch.cli import entry

entry()
