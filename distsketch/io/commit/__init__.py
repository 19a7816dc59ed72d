"""How an output becomes visible whole or not at all: temporary sibling then
rename, manifest last on object stores, chunk digests and the JSON of
manifests.
"""
