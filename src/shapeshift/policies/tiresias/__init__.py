"""Tiresias (Gu et al., NSDI 2019): discretized two-dimensional LAS, as its simulator runs it.

:mod:`.policy` registers ``tiresias``; :mod:`.queues` keeps the priority queues by attained
service, :mod:`.instants` the demotion and promotion instants in heaps, and
:mod:`.placement` the consolidation rules of Tiresias and of Blox's "Tiresias+".
"""
