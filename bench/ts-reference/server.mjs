// Reference MCP server for the load benchmark (scripts/bench.sh): the official
// TypeScript SDK serving one `echo` tool over Streamable HTTP, written the way the
// SDK's own examples do it (express via createMcpExpressApp).
//
//   node server.mjs stateful|stateless [port]      (or PORT=… in the environment)
//
// stateful:  sessionIdGenerator = randomUUID, one transport per session, kept in a
//            map by session id (the SDK README / simpleStreamableHttp example).
// stateless: sessionIdGenerator undefined, a new server + transport per request
//            (the SDK's simpleStatelessStreamableHttp example).
// Listens on 127.0.0.1 only and prints `ready <mode> http://127.0.0.1:<port>/mcp`.
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

const mode = process.argv[2] ?? process.env.MODE ?? 'stateful';
const port = Number(process.argv[3] ?? process.env.PORT ?? 0);
if (mode !== 'stateful' && mode !== 'stateless') {
  console.error(`usage: node server.mjs stateful|stateless [port] (got ${mode})`);
  process.exit(2);
}

/** One MCP server with the equivalent of Toolshed's demo/echo. */
function getServer() {
  const server = new McpServer({ name: 'ts-reference/echo', version: 'v1' });
  server.registerTool(
    'echo',
    {
      title: 'Echo',
      description: 'Returns the text it is given.',
      inputSchema: { text: z.string().describe('The text to send back') },
    },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

const jsonRpcError = (res, status, code, message) =>
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });

const app = createMcpExpressApp({ host: '127.0.0.1' });

if (mode === 'stateful') {
  /** @type {Record<string, StreamableHTTPServerTransport>} */
  const transports = {};

  app.post('/mcp', async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    try {
      let transport;
      if (sessionId && transports[sessionId]) {
        transport = transports[sessionId];
      } else if (!sessionId && isInitializeRequest(req.body)) {
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => {
            transports[id] = transport;
          },
        });
        transport.onclose = () => {
          if (transport.sessionId) delete transports[transport.sessionId];
        };
        await getServer().connect(transport);
      } else if (sessionId) {
        return jsonRpcError(res, 404, -32001, 'Session not found');
      } else {
        return jsonRpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
      }
      await transport.handleRequest(req, res, req.body);
    } catch (error) {
      console.error('Error handling MCP request:', error);
      if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal server error');
    }
  });

  // GET (server-to-client stream) and DELETE (end the session) go to the session's transport.
  const sessionRequest = async (req, res) => {
    const transport = transports[req.headers['mcp-session-id']];
    if (!transport) return jsonRpcError(res, req.headers['mcp-session-id'] ? 404 : 400, -32000, 'Invalid or missing session ID');
    await transport.handleRequest(req, res);
  };
  app.get('/mcp', sessionRequest);
  app.delete('/mcp', sessionRequest);
} else {
  app.post('/mcp', async (req, res) => {
    const server = getServer();
    try {
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
      res.on('close', () => {
        transport.close();
        server.close();
      });
    } catch (error) {
      console.error('Error handling MCP request:', error);
      if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal server error');
    }
  });
  const notAllowed = (_req, res) => res.status(405).set('Allow', 'POST').json({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
  app.get('/mcp', notAllowed);
  app.delete('/mcp', notAllowed);
}

const httpServer = app.listen(port, '127.0.0.1', (error) => {
  if (error) {
    console.error('Failed to start server:', error);
    process.exit(1);
  }
  console.log(`ready ${mode} http://127.0.0.1:${httpServer.address().port}/mcp`);
});

process.on('SIGINT', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
