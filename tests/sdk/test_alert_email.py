"""Budget alert e-mail through a real SMTP server on loopback (PyPI's aiosmtpd) that requires
STARTTLS and a login, with a certificate from a private authority (SMTP_CA_FILE): a key's soft
budget, passed by one request made with the OpenAI SDK, reaches the address the key names,
once."""

import datetime
import ipaddress
import pathlib
import ssl
import time

import openai
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import MASTER_KEY, _free_port, _json, _start, _stop


def _certificate(d):
    """A private authority and a server certificate for 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alerts test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    (d / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                  serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return d / "ca.pem"


class _Inbox:
    def __init__(self):
        self.mail = []

    async def handle_DATA(self, server, session, envelope):
        self.mail.append({
            "to": list(envelope.rcpt_tos),
            "text": envelope.content.decode("utf-8", "replace"),
            "tls": session.ssl is not None,
            "login": session.authenticated,
        })
        return "250 OK"


def _login(server, session, envelope, mechanism, auth_data):
    return AuthResult(success=auth_data.login == b"alerts" and auth_data.password == b"s3cret")


@pytest.fixture(scope="module")
def smtp(workdir):
    d = pathlib.Path(workdir) / "smtp"
    d.mkdir(exist_ok=True)
    ca = _certificate(d)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(d / "cert.pem", d / "key.pem")
    inbox = _Inbox()
    port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port, tls_context=tls,
                            require_starttls=True, auth_require_tls=True, auth_required=True,
                            authenticator=_login)
    controller.start()
    yield port, ca, inbox
    controller.stop()


def test_a_soft_budget_alert_arrives_by_starttls_mail(workdir, smtp):
    port, ca, inbox = smtp
    d = pathlib.Path(workdir) / "alert-gw"
    d.mkdir(exist_ok=True)
    config = d / "config.yaml"
    config.write_text(f"""
model_list:
  - model_name: priced
    litellm_params: {{model: mock/priced, input_cost_per_token: 0.000001, output_cost_per_token: 0.000002}}
general_settings:
  master_key: {MASTER_KEY}
  alerting: [email]
""")
    env = {
        "SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(port), "SMTP_USERNAME": "alerts",
        "SMTP_PASSWORD": "s3cret", "SMTP_SENDER_EMAIL": "alerts@sluice.test", "SMTP_TLS": "True",
        "SMTP_CA_FILE": str(ca),
    }
    gw_port = _free_port()
    proc, _, log = _start(["serve", "--config", str(config), "--port", str(gw_port)], str(d), env)
    try:
        root = f"http://127.0.0.1:{gw_port}"
        key = _json("POST", root + "/key/generate", {
            "key_alias": "mailer", "soft_budget": 0.00001,
            "metadata": {"soft_budget_alerting_emails": ["owner@example.com"]},
        }, {"authorization": f"Bearer {MASTER_KEY}"})["key"]
        sdk = openai.OpenAI(base_url=root + "/v1", api_key=key, max_retries=0)
        sdk.chat.completions.create(model="priced", messages=[{"role": "user", "content": "hi"}])
        deadline = time.time() + 10
        while time.time() < deadline and not inbox.mail:
            time.sleep(0.1)
        assert inbox.mail, open(log).read()[-2000:]
        time.sleep(2.5)
        assert len(inbox.mail) == 1, "once per crossing"
        m = inbox.mail[0]
        assert m["to"] == ["owner@example.com"]
        assert m["tls"] and m["login"], m
        assert "Soft budget crossed" in m["text"] and "mailer" in m["text"], m["text"]
        assert "s3cret" not in open(log).read()
    finally:
        _stop(proc)
