/**
 * A push receiver in a process of its own, for a test to SIGKILL in the middle of a request:
 * `node push-receiver-process.ts PORT LOG [HANG_ID]`. It prints its port once listening, answers
 * each delivery 200 with `{by: pid, attempt}` after a short wait, and writes a line to LOG for each
 * answer it is about to give; the delivery of job HANG_ID it never answers (its line says "hang").
 * Signatures are not checked here: the in-process receiver's tests check them.
 */
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const [port, log, hang] = process.argv.slice(2);
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const d = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; attempt: number };
    const line = (answer: number | 'hang') =>
      appendFileSync(log!, `${JSON.stringify({ id: d.id, attempt: d.attempt, answer, pid: process.pid })}\n`);
    if (d.id === hang) return line('hang');
    setTimeout(() => {
      line(200);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ by: process.pid, attempt: d.attempt }));
    }, 20);
  });
});
server.listen(Number(port), '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
