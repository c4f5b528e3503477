// Preloaded (node --import) into server-everything's HTTP transports by the Go harness.
// server-everything listens on every interface at $PORT and logs $PORT, not the port it got;
// this binds it to 127.0.0.1 instead, so that PORT=0 lets the OS pick a free port, and prints
// the address once the server listens, which is when the Go side may connect.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
    this.once("listening", () => {
      const a = this.address();
      process.stderr.write(`packbot-interop: listening on ${a.address}:${a.port}\n`);
    });
  }
  return listen.apply(this, args);
};
