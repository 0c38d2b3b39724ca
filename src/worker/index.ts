import { app } from './app.ts';

export { QueueObject } from '../durable/queue-object.ts';
export { TokenGate } from '../durable/gate.ts';
export { MoverObject } from '../durable/mover.ts';
export default app satisfies ExportedHandler<Env>;
