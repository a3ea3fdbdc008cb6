"""A real Apache Kafka beside the model: the same scenario run on a local KRaft cluster.

The package sits between the checker and the model (``eosim.analysis`` over ``eosim.real`` over
``eosim.simulation``): it takes a validated :class:`~eosim.simulation.scenario.Scenario` and the
fault schedule the model would realise for a seed, drives them against Kafka's own broker and
client (JVM processes on this machine) and hands back a history in eosim's format. Like the
model, it knows nothing of checkers.

Modules, one concept each:

- :mod:`eosim.real.install`: Kafka's jars from Maven Central (or ``KAFKA_HOME``) and the
  workload driver compiled against them;
- :mod:`eosim.real.cluster`: the local cluster, one JVM per node, with its fault operations;
- :mod:`eosim.real.netns`: network faults on real processes (namespaces, nftables);
- :mod:`eosim.real.delayer`: the process that holds a delayed node's packets (NFQUEUE);
- :mod:`eosim.real.clients`: the workload driver's processes, one per application;
- :mod:`eosim.real.runner`: one run, as a short list of named phases, like the model's.
"""


class RealError(RuntimeError):
    """A real cluster or client that could not do what a run needed (a node that would not
    start, a driver that failed); its text is one line for the user. Every error of this
    package that is not the user's input derives from it."""
