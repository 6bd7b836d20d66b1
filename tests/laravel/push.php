<?php
// Pushes jobs through Laravel's own queue classes, as a Laravel app's code does:
//
//   php tests/laravel/push.php PORT PREFIX QUEUE              Queue::push('record', ...) due
//       now, the same through Queue::later(2, ...), and Queue::push('noop') with Laravel's
//       default data ''; one line per job: its kind and the due time it carries, in ms
//   php tests/laravel/push.php PORT PREFIX QUEUE FROM TO [FAIL_ON]
//       Queue::push('Recorder@handle', ['n' => N, 'fail_on' => FAIL_ON]) for N from FROM up
//       to TO (excluded); FAIL_ON (laravel or rust) makes the job fail on that side
//   php tests/laravel/push.php PORT PREFIX QUEUE TRACE TRACEPARENT REQUEST_ID
//       Queue::push('Recorder@handle', ['n' => 1]) with the payload keys a Laravel app with
//       OpenTelemetry and Context (Laravel 11+) adds through createPayloadUsing: `traceparent`,
//       and `illuminate:log:context` holding REQUEST_ID as `request_id`
//   php tests/laravel/push.php PORT PREFIX QUEUE CLASS [KEY]  a SendInvoice object (bootstrap.php),
//       as SendInvoice::dispatch(...) queues it, encrypted with the app key KEY when given
require __DIR__ . '/bootstrap.php';

$port = (int) $argv[1];
[$prefix, $queueName] = [$argv[2], $argv[3]];
[$container, $capsule] = laravel_queue($port, $prefix);
$queue = $capsule->getConnection();

if (($argv[4] ?? '') === 'TRACE') {
    Illuminate\Queue\Queue::createPayloadUsing(fn ($connection, $queue, $payload) => [
        'traceparent' => $argv[5],
        'illuminate:log:context' => ['data' => ['request_id' => serialize($argv[6])], 'hidden' => []],
    ]);
    $queue->push('Recorder@handle', ['n' => 1], $queueName);
    exit(0);
}
if (($argv[4] ?? '') === 'CLASS') {
    // A Laravel app's own job class, as SendInvoice::dispatch(...) queues it; encrypted with
    // the app's key when one is given (base64:..., as APP_KEY holds it).
    if (isset($argv[5])) {
        $key = base64_decode(substr($argv[5], strlen('base64:')));
        $container->instance(
            Illuminate\Contracts\Encryption\Encrypter::class,
            new Illuminate\Encryption\Encrypter($key, 'AES-256-CBC')
        );
    }
    $queue->push(new SendInvoice(7, 'first/second', ['a' => 1.5, 'b' => [1, 2]]), '', $queueName);
    exit(0);
}
if (isset($argv[5])) {
    // With FAIL_ON (laravel or rust) as a sixth argument, the jobs fail on that side.
    $failOn = $argv[6] ?? null;
    for ($n = (int) $argv[4]; $n < (int) $argv[5]; $n++) {
        $queue->push('Recorder@handle', ['n' => $n, 'fail_on' => $failOn], $queueName);
    }
    exit(0);
}
$now = (int) floor(microtime(true) * 1000);
$queue->push('record', ['due_ms' => $now], $queueName);
echo "push $now\n";
// Laravel keeps a delayed job's due time in whole seconds.
$due = (time() + 2) * 1000;
$queue->later(2, 'record', ['due_ms' => $due], $queueName);
echo "later $due\n";
$queue->push('noop', '', $queueName);
echo "noop 0\n";
