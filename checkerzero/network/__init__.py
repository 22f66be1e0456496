"""The network and what reads and runs it: the model, inference, precision, the file format."""
