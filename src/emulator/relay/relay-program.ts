/**
 * The relay program, as vnode writes it into the relay's ConfigMap (key
 * `relay.py`) and the relay pod runs it with the image's python3 (3.8 or
 * later, standard library only). The unit test runs this very text.
 */
export const RelayProgramKey = 'relay.py'

export const RelayProgram = String.raw`# The vnode relay: the kubelet endpoint of a vnode node that the API server
# cannot reach. vnode keeps idle tunnel connections open to TUNNEL_PORT
# (through the API server's pods/portforward, so only on the pod's loopback);
# each connection to PUBLIC_PORT (the API server, metrics-server) is paired
# with one idle tunnel and bytes are copied both ways. TLS ends at vnode, so
# authentication and authorization stay vnode's. A connection that finds no
# idle tunnel is reset at once.
#
# On a tunnel, before pairing, the relay sends PING bytes (0x00): one at once,
# so vnode knows the tunnel reached the relay, then one every PING_SECONDS.
# On pairing it sends GO (0x01); every byte after it is the public
# connection's. Anything vnode sends on an idle tunnel closes it.
import asyncio
import os
import socket
import signal
import struct
from collections import deque

PUBLIC_HOST = os.environ.get("VNODE_RELAY_HOST", "0.0.0.0")
PUBLIC_PORT = int(os.environ.get("VNODE_RELAY_PORT", "10250"))
TUNNEL_HOST = os.environ.get("VNODE_RELAY_TUNNEL_HOST", "127.0.0.1")
TUNNEL_PORT = int(os.environ.get("VNODE_RELAY_TUNNEL_PORT", "10251"))
PING_SECONDS = float(os.environ.get("VNODE_RELAY_PING_SECONDS", "15"))
PING = b"\x00"
GO = b"\x01"
CHUNK = 64 * 1024

idle = deque()
counts = {"paired": 0, "refused": 0}


def log(line):
    print(line, flush=True)


class Tunnel:
    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        loop = asyncio.get_running_loop()
        self.peer = loop.create_future()
        # Set when the copy from the tunnel to the public connection has ended.
        self.back = loop.create_future()


async def copy(reader, writer, first=b""):
    """Copies reader to writer until EOF, then half-closes writer."""
    try:
        if first:
            writer.write(first)
            await writer.drain()
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError, asyncio.CancelledError):
        pass


def close(writer):
    try:
        writer.close()
    except (ConnectionError, OSError):
        pass


def reset(writer):
    """Closes a connection with a RST, so its peer learns at once that nothing is behind it."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    close(writer)


async def on_tunnel(reader, writer):
    tunnel = Tunnel(reader, writer)
    idle.append(tunnel)
    pending = asyncio.ensure_future(reader.read(CHUNK))
    try:
        writer.write(PING)
        await writer.drain()
        while not tunnel.peer.done():
            await asyncio.wait({pending, tunnel.peer}, timeout=PING_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            if tunnel.peer.done():
                break
            if pending.done():
                # vnode closed it (or broke the protocol) while idle.
                return
            writer.write(PING)
            await writer.drain()
    except (ConnectionError, OSError):
        return
    finally:
        if tunnel in idle:
            idle.remove(tunnel)
        if not tunnel.peer.done():
            tunnel.peer.cancel()
            pending.cancel()
            close(writer)
    _, public_writer = tunnel.peer.result()
    try:
        first = await pending
        if first:
            await copy(reader, public_writer, first)
        elif public_writer.can_write_eof():
            public_writer.write_eof()
    except (ConnectionError, OSError):
        pass
    finally:
        tunnel.back.set_result(None)


async def on_public(reader, writer):
    tunnel = None
    while idle:
        candidate = idle.popleft()
        if not candidate.writer.is_closing() and not candidate.peer.done():
            tunnel = candidate
            break
    if tunnel is None:
        counts["refused"] += 1
        log(f"refused a connection from {peer_of(writer)}: no idle tunnel ({counts['refused']} refused)")
        reset(writer)
        return
    counts["paired"] += 1
    try:
        tunnel.writer.write(GO)
    except (ConnectionError, OSError):
        reset(writer)
        return
    tunnel.peer.set_result((reader, writer))
    # Both directions end before both connections close.
    await asyncio.gather(copy(reader, tunnel.writer), tunnel.back)
    close(writer)
    close(tunnel.writer)


def peer_of(writer):
    p = writer.get_extra_info("peername")
    return f"{p[0]}:{p[1]}" if p else "?"


async def main():
    stop = asyncio.get_running_loop().create_future()
    # As a container's PID 1, SIGTERM has no default action: end on it.
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    tunnels = await asyncio.start_server(on_tunnel, TUNNEL_HOST, TUNNEL_PORT, reuse_address=True)
    public = await asyncio.start_server(on_public, PUBLIC_HOST, PUBLIC_PORT, reuse_address=True)
    log(f"vnode relay: public {PUBLIC_HOST}:{PUBLIC_PORT}, tunnels {TUNNEL_HOST}:{TUNNEL_PORT}")
    async with tunnels, public:
        await stop
    log(f"vnode relay: stopping ({counts['paired']} paired, {counts['refused']} refused)")


if __name__ == "__main__":
    asyncio.run(main())
`
