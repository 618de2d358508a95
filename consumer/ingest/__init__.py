"""The consumer's write side, one step per module: `validate` (an event's shape) -> `materialize`
(pure: an event -> rows) -> `fold` (pure: a batch -> each table's rows by natural key) ->
`prepare` (those steps for a batch, in a worker process) -> `store_writes` (the one way into the
store, with hooks around each transaction) driven by `kafka_loop` (kafka-python in `kafka_io`)
and `http_route` (POST /api/v1/lineage); `change_publishing` is the hook that publishes what a
transaction changed to the lineage-changes topic."""
