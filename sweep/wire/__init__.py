"""What crosses a process boundary, each a small typed object defined once: the task a
client sends a worker (:mod:`sweep.wire.task`), the messages between a worker and its capped
child (:mod:`sweep.wire.protocol`) and the events a running sweep publishes
(:mod:`sweep.wire.events`). Standard library only: a capped child imports it before pinning."""
