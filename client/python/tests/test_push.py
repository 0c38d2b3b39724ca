"""verify_delivery against a signature made by the Standard Webhooks reference library (npm
`standardwebhooks` 1.1.1, `new Webhook(secret).sign("j1.1", new Date(1796400000000), body)`): the
vector below is its output, so this checks the spec's scheme, not our own signer."""
import unittest

import json

from lakeshore import Unauthorized, batch_answer, verify_batch, verify_delivery

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

    def test_reads_the_body_as_received_and_refuses_a_parsed_one_saying_how_to_get_it(self):
        for body in (BODY, BODY.encode(), bytearray(BODY.encode()), memoryview(BODY.encode())):
            self.assertEqual(verify_delivery(SECRET, HEADERS, body, now=NOW)["id"], "j1")
        # Flask's request.get_json(), a framework's parsed body: a setup error, said as one.
        with self.assertRaisesRegex(TypeError, r"^the delivery's body must be its bytes or text as received .*not a parsed dict: .*request\.get_data\(\)"):
            verify_delivery(SECRET, HEADERS, json.loads(BODY), now=NOW)
        # Written again from the parsed JSON, it is not the body that was signed.
        with self.assertRaisesRegex(Unauthorized, r"altered \(a body parsed and written again is: give the body as received\)"):
            verify_delivery(SECRET, HEADERS, json.dumps(json.loads(BODY)), now=NOW)

    def test_a_secret_that_is_not_one_is_said_so_and_not_echoed(self):
        # None is what a receiver gets from an answer that did not show the secret (it shows once);
        # a token or a secret cut short is pasted by mistake. Each is a setup error, named as one.
        for bad in (None, "", "whsec_", "lsk_dev_abc-_def", SECRET[:-3], ["whsec_" + "A" * 32, None], []):
            with self.assertRaisesRegex(TypeError, "push secret") as cm:
                verify_delivery(bad, HEADERS, BODY, now=NOW)
            self.assertNotIn("abc-_def", str(cm.exception))
            self.assertNotIn(SECRET[6:-3], str(cm.exception))


# A batch (push batch_size above 1), signed the same way: sign("batch_j1.1", new Date(1796400000000), BATCH).
BATCH = ('{"type":"lakeshore.batch","namespace":"default","queue":"q","worker_id":"lakeshore-push","jobs":['
         '{"id":"j1","attempt":1,"lease_until":1,"priority":0,"envelope":"e30=","delivery_token":null},'
         '{"id":"j2","attempt":3,"lease_until":1,"priority":5,"envelope":"WzFd","delivery_token":null}]}')
BATCH_HEADERS = {"webhook-id": "batch_j1.1", "webhook-timestamp": "1796400000",
                 "webhook-signature": "v1,U0RAmHpGTcdFI8xuPNj57m7H7MBXigDKxZiW6tf0d6E="}


class VerifyBatch(unittest.TestCase):
    def test_reads_a_batch_the_reference_signed(self):
        b = verify_batch(SECRET, BATCH_HEADERS, BATCH.encode(), now=NOW)
        self.assertEqual((b["queue"], b["webhook_id"]), ("q", "batch_j1.1"))
        self.assertEqual([(j["id"], j["attempt"], j["priority"], j["envelope"], j["worker_id"]) for j in b["jobs"]],
                         [("j1", 1, 0, b"{}", "lakeshore-push"), ("j2", 3, 5, b"[1]", "lakeshore-push")])

    def test_refuses_an_altered_batch_and_tells_one_kind_from_the_other(self):
        with self.assertRaises(Unauthorized):
            verify_batch(SECRET, BATCH_HEADERS, BATCH.replace('"j2"', '"j3"'), now=NOW)
        with self.assertRaisesRegex(TypeError, "verify_batch"):
            verify_delivery(SECRET, BATCH_HEADERS, BATCH, now=NOW)
        with self.assertRaisesRegex(TypeError, "verify_delivery"):
            verify_batch(SECRET, HEADERS, BODY, now=NOW)

    def test_batch_answer_is_the_wire_outcomes(self):
        body = batch_answer({"j1": {"ok": {"n": 2}}, "j2": {"retry": True, "error": "later", "delay_ms": 5000}, "j3": {"accepted": True}})
        self.assertEqual(json.loads(json.dumps(body)), {"outcomes": {
            "j1": {"status": "ok", "result": {"n": 2}},
            "j2": {"status": "retry", "error": "later", "delay_ms": 5000},
            "j3": {"status": "accepted"}}})
        with self.assertRaises(ValueError):
            batch_answer({"j1": {"maybe": True}})


if __name__ == "__main__":
    unittest.main()
