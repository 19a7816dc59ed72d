"""Where data lives: paths and URLs (``urls.resolve`` -> ``Location``), the
base of the storage kinds, what may be replaced and the link checks
(``safety``), writer locks and claims, codecs.
"""
