"""What cud knows of the model APIs it talks to (today the Responses API): their limits, and how a request counts.

Shared by the daemon's model client (``daemon/model/``) and the scripted model that stands in
for the API in tests and demos (``cud/scripted/``).
"""
