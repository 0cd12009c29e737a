"""Signals and notifications: Debezium's signalling channels and notification channels.

- `model`: the signal record and the checked request of each signal type; `conditions`: the
  `additional-conditions` filters (sqlglot); `catalog`: the captured tables a signal may name.
- `channels`: source (the signal table, read from the log), delta (`_state/signals`), file, kafka.
- `journal`: exactly-once processing (`_state/signal_log`); `tables`: the Delta state tables.
- `processor`: the thread that polls the channels and runs the handler of each signal.
- `notify`: the notification record and its channels (log, sink, delta), the Notifier API.
"""
