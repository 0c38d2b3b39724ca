/** A worker process's mount of one stamp (test/node/code-mount.test.ts runs two at once): prints the directory. */
import { HttpDispatch } from '../../../client/http/dispatch.ts';
import { Mounts } from '../../../client/worker/mount.ts';

const [url, token, ns, home, stamp] = process.argv.slice(2) as [string, string, string, string, string];
const d = new HttpDispatch(url, { token, namespace: ns });
const dir = await new Mounts((s) => d.fetchCode(s), home).mount(stamp);
process.stdout.write(`${dir}\n`);
