"""The public side of the NAT test (run in the "public" namespace by test_nat.py): an embedded session server on
127.0.0.1 and a TCP proxy on the public address in front of it that records what the server sends to clients
(the offers, answers and candidates a client signals reach the other client that way, unmasked).

    python3 nat_server.py PUBLIC_IP PORT CAPTURE_FILE

Prints one JSON line {url, api_key, session_id, tokens}, then serves until stdin closes."""
import asyncio
import json
import sys
import threading

import otsession


async def pipe(reader, writer, capture):
    try:
        while data := await reader.read(65536):
            if capture is not None:
                capture.write(data)
                capture.flush()
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main(ip: str, port: int, capture_path: str) -> None:
    server = otsession.Server(api_key="4700004", api_secret="cd" * 20)
    server.start()
    sid = server.create_session(relayed=True)
    capture = open(capture_path, "wb")

    async def client(reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", server.port)
        await asyncio.gather(pipe(reader, up_writer, None), pipe(up_reader, writer, capture))

    proxy = await asyncio.start_server(client, ip, port)
    print(json.dumps({"url": f"http://{ip}:{port}", "api_key": server.api_key, "session_id": sid,
                      "tokens": [server.token(sid, "publisher") for _ in range(2)]}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)), daemon=True).start()
    async with proxy:
        await stop.wait()
    capture.close()
    server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
