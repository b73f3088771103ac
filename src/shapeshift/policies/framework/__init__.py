"""The composable parts every policy family builds on.

``ComposedPolicy`` (:mod:`.composed`) chains an admission (:mod:`.admission`), an ordering
and a placement (:mod:`.placement`), with evictions (:mod:`.evictions`) and queues
(:mod:`.queues`) as shared pieces; :mod:`.rounds` runs round-based policies, and
:mod:`.estimators` gives orderings their duration estimates. :mod:`.registry` builds any
policy by name from validated parameters, and :mod:`.fifo` is the smallest policy made
from these parts. Nothing here knows a particular paper's rules: those live in the family
packages beside this one.
"""
