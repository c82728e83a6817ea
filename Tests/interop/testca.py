"""A certificate authority made at test time with the `openssl` command (ECDSA P-256, valid two days) and the server
certificates it signs; `context()` is an ssl.SSLContext trusting only it (TLS 1.2 and 1.3, names checked)."""
import ipaddress
import os
import ssl
import subprocess
import tempfile


def _openssl(*args):
    r = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {args[0]}: {r.stderr.strip()}")


class TestCA:
    __test__ = False  # not a pytest class

    def __init__(self, directory=None, name="otsession test CA"):
        self.dir = directory or tempfile.mkdtemp(prefix="ot-ca-")
        os.makedirs(self.dir, exist_ok=True)
        tag = name.replace(" ", "-")
        self.ca_file = os.path.join(self.dir, f"{tag}.pem")
        self.key_file = os.path.join(self.dir, f"{tag}.key")
        self.serial = 1
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", self.key_file,
                 "-out", self.ca_file, "-days", "2", "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue(self, names, label="server"):
        """A server certificate for `names` (DNS names and IP addresses) and its key: (cert path, key path)."""
        base = os.path.join(self.dir, label)
        san = ",".join(f"IP:{n}" if _is_ip(n) else f"DNS:{n}" for n in names)
        with open(base + ".ext", "w") as f:
            f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", base + ".key",
                 "-out", base + ".csr", "-subj", f"/CN={names[0]}")
        self.serial += 1
        _openssl("x509", "-req", "-in", base + ".csr", "-CA", self.ca_file, "-CAkey", self.key_file, "-set_serial",
                 str(self.serial), "-out", base + ".pem", "-days", "2", "-extfile", base + ".ext")
        return base + ".pem", base + ".key"

    def context(self, minimum=None, maximum=None):
        """A client context trusting only this CA (optionally pinned to TLS versions)."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if minimum:
            ctx.minimum_version = minimum
        if maximum:
            ctx.maximum_version = maximum
        return ctx


def _is_ip(s):
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False
