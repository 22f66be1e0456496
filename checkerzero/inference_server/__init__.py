"""The inference server: one process per GPU that runs the network for every search on its node.

``server`` (the server and its settings), ``batching`` (its clients, requests and batch
workers), ``protocol`` (the wire format: a socket for control, a shared buffer for the data) and
``client`` (the searches' side, a leaf inference over the socket). The Ray actor that starts a
server on a GPU node is ``actors.inference_server``.
"""
