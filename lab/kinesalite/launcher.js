// Runs kinesalite in memory on 127.0.0.1 only (its command line listens on every
// interface), with streams active at once, and exits when standard input ends: the Go
// process that started it holds the other end, so it exits however that process ends.
// Arguments: the kinesalite package directory, the port.
'use strict'
const kinesalite = require(process.argv[1])
const port = Number(process.argv[2])
const server = kinesalite({createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 1000})
server.on('error', (err) => {
  console.error('kinesalite: ' + err.message)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => console.log('kinesalite listening on 127.0.0.1:' + port))
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
