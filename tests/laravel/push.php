<?php
// Pushes jobs through Laravel's own queue classes (Laravel 8.83 from Debian's
// php-laravel-framework, over php-redis), as a Laravel app's code does:
//
//   php tests/laravel/push.php PORT PREFIX QUEUE
//
// PREFIX is the Redis connection's key prefix (database.redis.options.prefix; '' for none).
// It pushes, onto QUEUE: Queue::push('record', ['due_ms' => ...]) due now, the same through
// Queue::later(2, ...) due in two seconds, and Queue::push('noop') with Laravel's default data
// ''. It prints one line per job: its kind and the due time it carries, in ms.
require 'Illuminate/autoload.php';

use Illuminate\Container\Container;
use Illuminate\Queue\Capsule\Manager as QueueManager;
use Illuminate\Redis\RedisManager;

[, $port, $prefix, $queueName] = $argv;
$container = new Container;
$container->instance('redis', new RedisManager($container, 'phpredis', [
    'options' => ['prefix' => $prefix],
    'default' => ['host' => '127.0.0.1', 'port' => (int) $port, 'database' => 0],
]));
$manager = new QueueManager($container);
$manager->addConnection([
    'driver' => 'redis', 'connection' => 'default', 'queue' => $queueName, 'retry_after' => 90,
]);
$queue = $manager->getConnection();

$now = (int) floor(microtime(true) * 1000);
$queue->push('record', ['due_ms' => $now], $queueName);
echo "push $now\n";
// Laravel keeps a delayed job's due time in whole seconds.
$due = (time() + 2) * 1000;
$queue->later(2, 'record', ['due_ms' => $due], $queueName);
echo "later $due\n";
$queue->push('noop', '', $queueName);
echo "noop 0\n";
