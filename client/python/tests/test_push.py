"""verify_delivery against a signature made by the Standard Webhooks reference library (npm
`standardwebhooks` 1.1.1, `new Webhook(secret).sign("j1.1", new Date(1796400000000), body)`): the
vector below is its output, so this checks the spec's scheme, not our own signer."""
import unittest

from lakeshore import Unauthorized, verify_delivery

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = ('{"type":"lakeshore.delivery","id":"j1","namespace":"default","queue":"q","attempt":1,"lease_until":1,'
        '"priority":0,"envelope":"e30=","worker_id":"lakeshore-push","delivery_token":null}')
HEADERS = {"Webhook-Id": "j1.1", "webhook-timestamp": "1796400000", "webhook-signature": "v1,m8kIpkAP31pSPgFjOxtcx4lmEvxiH4dsCSJL7+aI/Go="}
NOW = 1796400010


class VerifyDelivery(unittest.TestCase):
    def test_reads_a_delivery_the_reference_signed(self):
        d = verify_delivery(SECRET, HEADERS, BODY, now=NOW)
        self.assertEqual((d["id"], d["attempt"], d["webhook_id"], d["envelope"]), ("j1", 1, "j1.1", b"{}"))
        self.assertEqual(verify_delivery(["whsec_" + "A" * 32, SECRET], HEADERS, BODY.encode(), now=NOW)["queue"], "q")

    def test_refuses_an_altered_body_another_secret_or_an_old_timestamp(self):
        with self.assertRaises(Unauthorized):
            verify_delivery(SECRET, HEADERS, BODY.replace('"j1"', '"j2"'), now=NOW)
        with self.assertRaises(Unauthorized):
            verify_delivery("whsec_" + "A" * 32, HEADERS, BODY, now=NOW)
        with self.assertRaises(Unauthorized):
            verify_delivery(SECRET, HEADERS, BODY, now=NOW + 301)
        with self.assertRaises(Unauthorized):
            verify_delivery(SECRET, {}, BODY, now=NOW)


if __name__ == "__main__":
    unittest.main()
