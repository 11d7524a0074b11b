#!/usr/bin/python3
"""
tests/integration/netdelay.py: delays packets by a fixed time in user space,
for kernels without sch_netem (harness.NetNs.delay() uses `tc netem` when
it can, this otherwise).

  netdelay.py --queue N --delay-ms MS

It binds NFQUEUE queue N over a netfilter netlink socket (no library
needed) and gives each queued packet its NF_ACCEPT verdict MS milliseconds
after it arrived, in arrival order.  iptables rules with `-j NFQUEUE
--queue-num N` send it the packets to delay.  It prints "ready" once bound, and runs until it
is killed.  Only packet metadata is copied, never payloads.

The netlink messages (linux/netfilter/nfnetlink_queue.h):
  nlmsghdr (len u32, type u16, flags u16, seq u32, pid u32), all host order;
  type = NFNL_SUBSYS_QUEUE << 8 | msg;  then nfgenmsg (family u8, version u8,
  res_id u16 big-endian = the queue number);  then attributes (len u16,
  type u16, host order; payload padded to 4 bytes), whose payloads are
  big-endian:
    CONFIG  NFQA_CFG_CMD {command u8, pad u8, pf u16}, NFQA_CFG_PARAMS
            {copy_range u32, copy_mode u8}
    PACKET  NFQA_PACKET_HDR {packet_id u32, hw_protocol u16, hook u8}
    VERDICT NFQA_VERDICT_HDR {verdict u32, id u32}
"""

import argparse
import heapq
import os
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS = 1, 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2


def attr(atype, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, atype) + payload + b"\0" * ((4 - n % 4) % 4)


def message(msg, queue, attrs, flags=NLM_F_REQUEST, seq=0):
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), NFNL_SUBSYS_QUEUE << 8 | msg, flags, seq, 0) + body


def request(sock, msg, queue, attrs, seq):
    """Sends a request with NLM_F_ACK and raises OSError if the kernel refuses it."""
    sock.send(message(msg, queue, attrs, NLM_F_REQUEST | NLM_F_ACK, seq))
    data = sock.recv(65536)
    for mtype, _flags, mseq, body in parse(data):
        if mtype == NLMSG_ERROR and mseq == seq:
            err = struct.unpack_from("=i", body)[0]
            if err:
                raise OSError(-err, os.strerror(-err))
            return


def parse(data):
    """(type, flags, seq, payload) of each netlink message in data."""
    off = 0
    while off + 16 <= len(data):
        n, mtype, flags, seq, _pid = struct.unpack_from("=IHHII", data, off)
        if n < 16:
            break
        yield mtype, flags, seq, data[off + 16:off + n]
        off += (n + 3) & ~3


def packet_id(body):
    """The packet id of an NFQNL_MSG_PACKET payload (after nfgenmsg), or None."""
    off = 4
    while off + 4 <= len(body):
        n, atype = struct.unpack_from("=HH", body, off)
        if n < 4:
            return None
        if atype & 0x3fff == NFQA_PACKET_HDR:
            return struct.unpack_from("!I", body, off + 4)[0]
        off += (n + 3) & ~3
    return None


def main():
    ap = argparse.ArgumentParser(description="delay NFQUEUE packets by a fixed time")
    ap.add_argument("--queue", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, required=True)
    a = ap.parse_args()
    delay = a.delay_ms / 1000.0
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    request(sock, NFQNL_MSG_CONFIG, a.queue,
            [attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET))], 1)
    request(sock, NFQNL_MSG_CONFIG, a.queue,
            [attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))], 2)
    print("ready", flush=True)
    due = []   # (time to release, packet id)
    while True:
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else None
        r, _, _ = select.select([sock], [], [], timeout)
        if r:
            try:
                data = sock.recv(1 << 16)
            except OSError as e:   # ENOBUFS: the kernel dropped messages; the rest go on
                print(f"netdelay: {e}", file=sys.stderr)
                continue
            now = time.monotonic()
            for mtype, _flags, _seq, body in parse(data):
                if mtype == NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET:
                    pid = packet_id(body)
                    if pid is not None:
                        heapq.heappush(due, (now + delay, pid))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, pid = heapq.heappop(due)
            sock.send(message(NFQNL_MSG_VERDICT, a.queue,
                              [attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pid))]))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
