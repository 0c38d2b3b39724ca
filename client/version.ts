/** This client's version: told to the plane in worker identities, tracer names and the User-Agent of Node requests. */
export const CLIENT_VERSION = '0.1.0';
