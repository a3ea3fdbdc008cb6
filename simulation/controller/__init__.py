"""The KRaft controller: broker liveness, partition leadership and ISR changes."""
