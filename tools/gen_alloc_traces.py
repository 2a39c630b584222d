#!/usr/bin/env python3
"""Writes the allocation traces allocator_peers_bench replays.

Each trace is seeded, so this script regenerates the shipped files byte for
byte:

    tools/gen_alloc_traces.py benchmarks/peers/traces

Format (benchmarks/peers/trace_replay.h): `streams <n>`, then one event a line,
`<time_us> a <id> <bytes> <stream>` or `<time_us> f <id>`.

The traces:
  transformer_training  3 steps of a 12-layer transformer (hidden 1024,
      sequence 512, batch 8, fp16): weights first, the Adam state (two fp32
      copies of the weights) at the first optimizer step; per step the forward
      keeps each layer's activations, the backward frees them in reverse while
      weight gradients and short-lived temporaries come and go.
  inference_server  600 requests of random batch (1..32) and sequence length
      (16..2048) on 2 streams, up to 8 in flight: each holds a KV cache for its
      life and allocates per-step temporaries sized by its batch x sequence.
  test_suite  150 tests, each creating a client (a model's weights drawn from
      four sizes, a workspace, a few buffers) that runs a few steps and is torn
      down before the next test starts.
"""

import os
import random
import sys

MIB = 1 << 20


class Writer:
    def __init__(self, name, streams, description):
        self.name = name
        self.lines = [f"# {name}: {description}", f"streams {streams}"]
        self.time = 0
        self.next_id = 0
        self.live = {}

    def tick(self, us):
        self.time += us

    def alloc(self, nbytes, stream=0):
        ident = self.next_id
        self.next_id += 1
        self.live[ident] = nbytes
        self.lines.append(f"{self.time} a {ident} {int(nbytes)} {stream}")
        self.tick(1)
        return ident

    def free(self, ident):
        del self.live[ident]
        self.lines.append(f"{self.time} f {ident}")
        self.tick(1)

    def write(self, directory):
        assert not self.live, f"{self.name}: {len(self.live)} never freed"
        with open(os.path.join(directory, self.name + ".trace"), "w") as out:
            out.write("\n".join(self.lines) + "\n")


def transformer_training():
    rng = random.Random(1)
    w = Writer("transformer_training", 1,
               "3 steps, 12 layers, hidden 1024, seq 512, batch 8, fp16, Adam")
    layers, hidden, seq, batch = 12, 1024, 512, 8
    act = batch * seq * hidden * 2  # one fp16 activation: 8 MiB
    weights = []
    for _ in range(layers):
        for shape in (hidden * 3 * hidden, hidden * hidden,
                      hidden * 4 * hidden, 4 * hidden * hidden):
            weights.append((w.alloc(shape * 2), shape))
        weights.append((w.alloc(hidden * 2 * 2), hidden * 2))  # norms
    optimizer = []
    for step in range(3):
        saved = []
        for _ in range(layers):  # forward: keep what backward needs
            for nbytes in (act * 3, act, act, act * 4, act * 4):
                saved.append(w.alloc(nbytes))
            tmp = w.alloc(rng.choice([4096, 16384, 65536]) * rng.randint(1, 8))
            w.tick(rng.randint(50, 200))
            w.free(tmp)
        loss = w.alloc(batch * seq * 4)
        grads = []
        for layer in reversed(range(layers)):  # backward, reverse order
            for _ in range(2):
                tmp = w.alloc(act * rng.choice([1, 2, 4]))
                w.tick(rng.randint(50, 300))
                w.free(tmp)
            for ident, shape in weights[layer * 5:(layer + 1) * 5]:
                grads.append(w.alloc(shape * 2))
            for ident in reversed(saved[layer * 5:(layer + 1) * 5]):
                w.free(ident)
        w.free(loss)
        if step == 0:  # Adam: exp_avg and exp_avg_sq in fp32
            for _, shape in weights:
                optimizer.append(w.alloc(shape * 4))
                optimizer.append(w.alloc(shape * 4))
        for ident in grads:
            w.free(ident)
        w.tick(1000)
    for ident in optimizer:
        w.free(ident)
    for ident, _ in weights:
        w.free(ident)
    return w


def inference_server():
    rng = random.Random(2)
    w = Writer("inference_server", 2,
               "600 requests, batch 1..32, seq 16..2048, 2 streams, "
               "8 in flight")
    layers, hidden = 24, 2048
    weights = [w.alloc(hidden * hidden * 12 * 2 // 4) for _ in range(4 * layers)]
    in_flight = []  # (kv id, batch, seq, steps left, stream)
    served = 0
    while served < 600 or in_flight:
        while served < 600 and len(in_flight) < 8 and rng.random() < 0.5:
            batch = rng.randint(1, 32)
            seq = int(2 ** rng.uniform(4, 11))
            stream = served % 2
            kv = w.alloc(2 * layers * batch * seq * hidden * 2 // 8, stream)
            in_flight.append([kv, batch, seq, rng.randint(2, 6), stream])
            served += 1
        if not in_flight:
            w.tick(100)
            continue
        request = rng.choice(in_flight)
        kv, batch, seq, _, stream = request
        temps = [w.alloc(batch * seq * hidden * 2 * k, stream)
                 for k in (1, 3, 1)]
        logits = w.alloc(batch * 32000 * 2, stream)
        w.tick(rng.randint(200, 2000))
        for ident in reversed(temps):
            w.free(ident)
        w.free(logits)
        request[3] -= 1
        if request[3] == 0:
            w.free(kv)
            in_flight.remove(request)
    for ident in weights:
        w.free(ident)
    return w


def test_suite():
    rng = random.Random(3)
    w = Writer("test_suite", 1,
               "150 tests, each creating and tearing down a client")
    models = [8 * MIB, 32 * MIB, 120 * MIB, 350 * MIB]
    for _ in range(150):
        model = rng.choice(models)
        client = [w.alloc(model // 16) for _ in range(16)]  # weights
        client.append(w.alloc(rng.choice([16, 64, 256]) * MIB))  # workspace
        client += [w.alloc(rng.randint(1, 1024) * 1024)
                   for _ in range(rng.randint(2, 10))]
        for _ in range(rng.randint(1, 5)):  # a few steps
            temps = [w.alloc(rng.randint(1, 64) * 64 * 1024)
                     for _ in range(rng.randint(1, 6))]
            w.tick(rng.randint(100, 1000))
            for ident in temps:
                w.free(ident)
        for ident in reversed(client):  # teardown
            w.free(ident)
        w.tick(5000)
    return w


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/peers/traces"
    os.makedirs(directory, exist_ok=True)
    for make in (transformer_training, inference_server, test_suite):
        make().write(directory)


if __name__ == "__main__":
    main()
