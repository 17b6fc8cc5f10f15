"""An outsider against a node of a trusted fleet, with bleak: no fleet key, only a BLE client.

Usage: DBUS_SYSTEM_BUS_ADDRESS=<box bus> python outsider.py ADDRESS MODE [HELLO_HEX] [TIMEOUT]

MODE:
  read-twice  connect, read the identity characteristic twice; prints {"reads": [hex, hex]}
  challenge   connect, read the challenge characteristic; prints {"challenge": hex}
  replay      connect, read a fresh challenge, write HELLO_HEX (a hello recorded on an earlier
              link) to the hello characteristic, read the identity; prints {"challenge": hex,
              "write_error": text or null, "identity": hex}

The characteristics are the general service's: identity 5830b129-…, hello 5830b12a-…,
challenge 5830b12b-… (docs/dbus-api.md).
"""

import asyncio
import json
import sys

from bleak import BleakClient, BleakScanner

IDENTITY = "5830b129-79a9-4a7e-be31-5d76f8856c51"
HELLO = "5830b12a-79a9-4a7e-be31-5d76f8856c51"
CHALLENGE = "5830b12b-79a9-4a7e-be31-5d76f8856c51"


async def main(address: str, mode: str, hello_hex: str, timeout: float) -> int:
    device = await BleakScanner.find_device_by_address(address, timeout=timeout)
    if device is None:
        print(json.dumps({"error": f"{address} not found within {timeout} s"}))
        return 1
    result: dict = {}
    async with BleakClient(device, timeout=timeout) as client:
        if mode == "read-twice":
            first = await client.read_gatt_char(IDENTITY)
            second = await client.read_gatt_char(IDENTITY)
            result["reads"] = [first.hex(), second.hex()]
        elif mode == "challenge":
            result["challenge"] = (await client.read_gatt_char(CHALLENGE)).hex()
        elif mode == "replay":
            result["challenge"] = (await client.read_gatt_char(CHALLENGE)).hex()
            try:
                await client.write_gatt_char(HELLO, bytes.fromhex(hello_hex), response=True)
                result["write_error"] = None
            except Exception as error:  # BleakDBusError: the ATT error BlueZ got back
                result["write_error"] = str(error)
            result["identity"] = (await client.read_gatt_char(IDENTITY)).hex()
        else:
            print(json.dumps({"error": f"unknown mode {mode}"}))
            return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    hello = args[2] if len(args) > 2 and args[1] == "replay" else ""
    rest = args[3:] if args[1:2] == ["replay"] else args[2:]
    sys.exit(asyncio.run(main(args[0], args[1], hello, float(rest[0]) if rest else 15.0)))
