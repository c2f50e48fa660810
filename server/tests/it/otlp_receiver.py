"""Receives OTLP/HTTP traces on 127.0.0.1:PORT with oteltap (a real OTLP
receiver, from PyPI) and prints each span as one JSON line: ids in hex, the
attributes as a flat object. Prints `listening` once spans can arrive."""

import asyncio
import json
import sys

from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings


def plain(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


async def print_spans(spans):
    async for span in spans:
        line = {
            "name": span.name,
            "trace_id": span.trace_id.hex(),
            "span_id": span.span_id.hex(),
            "parent_span_id": span.parent_span_id.hex(),
            "attributes": {a.key: plain(a.value) for a in span.attributes},
        }
        print(json.dumps(line), flush=True)


async def main(port):
    async with OtelTapHttpProtobufReceiver(OtelTapHttpProtobufReceiverSettings(http_port=port)) as receiver:
        printing = asyncio.create_task(print_spans(receiver.stream_traces()))
        # One turn of the loop: the task subscribes before anything is said to be ready.
        await asyncio.sleep(0)
        print("listening", flush=True)
        await printing


asyncio.run(main(int(sys.argv[1])))
