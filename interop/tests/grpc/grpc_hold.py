"""Holds a Producer and a SimpleConsumer of RocketMQ 5's Python SDK (PyPI
rocketmq-python-client 5.1.2, unchanged) open against ringmq's gRPC edge: their Telemetry
streams and the consumer's long poll stay open until this process is killed.

Usage: python grpc_hold.py ENDPOINT TOPIC

Prints `holding` once both started and a receive is parked, then waits.
"""

import sys
import threading
import time

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Producer,
                      SimpleConsumer)


def main():
    endpoint, topic = sys.argv[1], sys.argv[2]
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, "grpc-hold", {topic: FilterExpression("*")}, await_duration=20)
    consumer.startup()

    def poll():
        while True:
            try:
                consumer.receive(1, 20)
            except Exception:
                time.sleep(0.5)

    threading.Thread(target=poll, daemon=True).start()
    time.sleep(1)
    print("holding", flush=True)
    time.sleep(120)


if __name__ == "__main__":
    main()
