"""What the Python clients in tests/clients share: finding the gateway
(`discovery`), HTTP on its local Unix socket (`unix_http`), the file protocol
a test drives a seat through (`seat_files`), and the fleet bridge as an MCP
stdio server (`bridge`).

A client script puts the folder above this package on its path first:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
"""
