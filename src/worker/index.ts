import { app } from './app.ts';

export { QueueObject } from '../durable/queue-object.ts';
export default app satisfies ExportedHandler<Env>;
