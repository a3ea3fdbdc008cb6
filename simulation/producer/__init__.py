"""Client-side model of Kafka's producer: partitioner, RecordAccumulator, Sender and the
idempotence bookkeeping of TransactionManager, assembled by KafkaProducer."""
